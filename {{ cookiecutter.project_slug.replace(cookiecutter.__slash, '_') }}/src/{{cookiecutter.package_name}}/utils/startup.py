"""What every entry point needs before Hydra composes its config."""

from dotenv import find_dotenv, load_dotenv

from {{ cookiecutter.package_name }}.utils.resolvers import register


def before_hydra() -> None:
    """Read .env from the working directory (set variables win) and register the config resolvers."""
    load_dotenv(find_dotenv(usecwd=True))
    register()
