from services.core.server import main
from services.meter.server import build_server

main("meter", build_server)
