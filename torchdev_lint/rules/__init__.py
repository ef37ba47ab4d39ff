"""One module per rule; importing this package registers every rule in ``Rule.registry``."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
