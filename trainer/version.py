"""The Paddock version, in a module of its own so that any trainer module can read it without
importing the package's other modules."""

__version__ = "0.1.0"
