import logging
from typing import Any, Callable, Dict, Optional, TypeVar, overload

from ._pipetel import Span as Span
from ._pipetel import current_span as current_span
from ._pipetel import span as span
from ._pipetel import traceparent as traceparent

_F = TypeVar("_F", bound=Callable[..., Any])

@overload
def traced(func: _F, *, name: Optional[str] = None, attributes: Optional[Dict[str, Any]] = None) -> _F: ...
@overload
def traced(
    func: None = None, *, name: Optional[str] = None, attributes: Optional[Dict[str, Any]] = None
) -> Callable[[_F], _F]: ...

class LoggingHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None: ...
