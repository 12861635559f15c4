"""{{ cookiecutter.project_name }}: {{ cookiecutter.description }}"""
