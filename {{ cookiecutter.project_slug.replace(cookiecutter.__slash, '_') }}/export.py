from {{ cookiecutter.package_name }}.export import export

if __name__ == "__main__":
    export()
