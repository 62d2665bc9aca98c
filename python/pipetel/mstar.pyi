# mstar's names are pipetel.recorders' own.
from .recorders import *
from .recorders import __all__ as __all__
