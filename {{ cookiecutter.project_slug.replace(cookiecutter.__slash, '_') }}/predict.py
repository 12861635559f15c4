from {{ cookiecutter.package_name }}.predict import predict

if __name__ == "__main__":
    predict()
