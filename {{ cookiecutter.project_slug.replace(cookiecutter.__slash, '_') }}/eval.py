from {{ cookiecutter.package_name }}.eval import evaluate

if __name__ == "__main__":
    evaluate()
