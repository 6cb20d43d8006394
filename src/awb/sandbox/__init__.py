"""Where tool code runs: runtimes behind one small protocol, never inside the server process."""
