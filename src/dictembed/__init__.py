"""dictembed: sentence embeddings learned from dictionaries (DefSent, DefSent+, GR-BERT)."""

__version__ = "0.1.0"
