"""The authenticated channel for a program's hot calls.

`channel` (`ChannelServer`: HMAC-authenticated TCP, the handshake and its
limits), `serving` (the server's `selectors` loop), `channel_client`
(`ChannelClient`), `codec` (the wire format: numpy arrays and plain
containers, no pickle) and `batching` (`batched_handler`).
"""
