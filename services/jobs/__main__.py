from services.core.server import main
from services.jobs.server import build_server

main("jobs", build_server)
