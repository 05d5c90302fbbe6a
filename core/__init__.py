"""The c2 domain: protocol, engine, store, agents. Imports nothing from api/ or the web."""
