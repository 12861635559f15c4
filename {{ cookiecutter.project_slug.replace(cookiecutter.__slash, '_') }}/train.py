from {{ cookiecutter.package_name }}.train import main

if __name__ == "__main__":
    main()
