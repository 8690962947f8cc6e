"""A reward module that ends the process when imported (a script's `sys.exit` left at the bottom), for
tests/test_training_rewards.py: grpo said nothing and exited 3."""

import sys

sys.exit(3)
