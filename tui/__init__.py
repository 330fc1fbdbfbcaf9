"""The Textual dashboard behind ``nsqctl dash``."""
