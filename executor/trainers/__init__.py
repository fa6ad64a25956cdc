"""The trainers behind one interface (`base.Trainer`), found through the registry; the
agent knows them only by what they declare they support."""
