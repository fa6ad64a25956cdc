from services.tinker.server import main

main()
