from services.artifacts.server import build_server
from services.core.server import main

main("artifacts", build_server)
