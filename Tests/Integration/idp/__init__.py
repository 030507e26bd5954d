"""A real OAuth 2 / OpenID Connect authorization server for the integration tests.

The protocol work (grants, token endpoint, client authentication, PKCE,
refresh-token rotation, revocation, device authorization, userinfo, id_token
signing) is Authlib's; ``idp.server`` only wires it to in-memory models and
adds test switches under ``/_test/``. ``idp.control`` starts the server as a
subprocess and drives the switches.

    cd Tests/Integration && python3 -m idp.server --port 0 --access-ttl 2
"""
