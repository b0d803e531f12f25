from tests.webapp.api.fixtures import *  # noqa: F403 - fixtures shared by the web tests
