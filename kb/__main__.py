from kb.cli.main import run

run()
