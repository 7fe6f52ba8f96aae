"""Scripts run inside a paper's released code's environment by ``flb peer`` (each is started as a subprocess
with the user's checkout on ``sys.path``; it reads a JSON spec and writes a JSON result)."""
