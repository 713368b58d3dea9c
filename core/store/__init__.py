"""Storage: the SQLite truth store, the keyword index and the vector indexes."""
