"""One module per `grpo` command; cli/main.py only wires them."""
