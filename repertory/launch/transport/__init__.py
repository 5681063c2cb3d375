"""The authenticated channel for a program's hot calls.

`channel` (HMAC-authenticated TCP), `codec` (its wire format: numpy arrays and
plain containers, no pickle) and `batching` (`batched_handler`).
"""
