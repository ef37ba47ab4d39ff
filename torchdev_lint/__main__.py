import sys

from torchdev_lint.launcher import main

sys.exit(main())
