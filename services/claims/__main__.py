from services.claims.server import build_server
from services.core.server import main

main("claims", build_server)
