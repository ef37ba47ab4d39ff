import sys

from torchdev_lint.cli import main

sys.exit(main())
