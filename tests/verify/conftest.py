import pytest


@pytest.fixture(scope="session")
def emulator_build():
    from npu_migrate.emulate.build import build

    return build()
