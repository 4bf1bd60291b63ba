"""Model providers behind one small protocol (see ``base``)."""
