from aoti_trace.cli import main

main()
