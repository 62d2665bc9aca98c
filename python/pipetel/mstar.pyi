# mstar's names are pipetel.recorders' own.
from .recorders import *
