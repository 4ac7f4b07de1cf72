"""Recipes: DefSent, DefSent+ and GR-BERT as configurations of the shared parts."""
