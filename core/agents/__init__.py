"""The ACP client side over subprocess stdio, and the bundled demo agent."""
