print("platform-proxy")
