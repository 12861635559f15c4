"""Plain torch.nn.Modules. They know nothing of Lightning and are chosen by config."""
