"""The ``nsqctl dash`` terminal dashboard (Textual); it renders ``nsqctl.stats`` views."""
