import sys

from torchdev_lint.launcher import main

# Guarded: a worker process started by spawn (or a fork server) imports the main module again.
if __name__ == "__main__":
    sys.exit(main())
