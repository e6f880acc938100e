from npu_migrate.cli import console

console()
