"""Money (HIP-1333 §10): rates, wallets, the double-entry ledger, and the windows a task
holds and is charged for. MeterService owns these tables and serves them; claims, reports
and creates move money through this package inside their own transactions."""

from services.core.money.windows import Policy

__all__ = ["Policy"]
