"""The tdbg web UI: a Flask app that only asks the `debugger` library."""
