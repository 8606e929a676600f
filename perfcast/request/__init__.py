"""One request, one answer: the option schema every surface is generated from
(:mod:`~perfcast.request.fields`), the parsed and validated :class:`Request`, the
:class:`Estimate` every mode answers with, and the engine that answers each mode
(:mod:`~perfcast.request.engines`)."""

from perfcast.request.fields import FIELDS, Field, field, fields_of
from perfcast.request.request import Options, Request

__all__ = ["FIELDS", "Field", "Options", "Request", "field", "fields_of"]
