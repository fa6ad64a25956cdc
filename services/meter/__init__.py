"""MeterService: rates, payers, wallets, holds, charges, the ledger, storage accrual."""
