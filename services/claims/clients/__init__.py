"""ClientService: interactive training clients (HIP-1333 §2, §7). A client is leased on an
executor as a task is, and its calls travel on the executor's stream, so the ClaimService
process serves it."""
