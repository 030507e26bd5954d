// The few OpenSSL libcrypto calls the proxy makes: signing client assertions (RFC 7523) with a
// PEM private key, and checking that a TLS client certificate belongs to its key. Kept in C so
// no OpenSSL type or macro reaches Swift: the Swift side sees opaque pointers and plain results.
// No feature macros here: every shim in the package must agree on them.
#ifndef PLATFORM_PROXY_CCRYPTO_SHIM_H
#define PLATFORM_PROXY_CCRYPTO_SHIM_H

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <string.h>

/* What a parsed private key can sign with. */
enum { CCRYPTO_KEY_OTHER = 0, CCRYPTO_KEY_RSA = 1, CCRYPTO_KEY_EC_P256 = 2, CCRYPTO_KEY_EC_OTHER = 3 };

/* A private key from PEM bytes (PKCS#8, traditional RSA or EC), or NULL: not a private key. */
static inline void *ccrypto_private_key(const void *pem, long length) {
    BIO *bio = BIO_new_mem_buf(pem, (int)length);
    if (!bio) return 0;
    EVP_PKEY *key = PEM_read_bio_PrivateKey(bio, 0, 0, (void *)"");
    BIO_free(bio);
    ERR_clear_error();
    return key;
}

static inline void ccrypto_free_key(void *key) { EVP_PKEY_free((EVP_PKEY *)key); }

/* The key's kind: RSA, EC on P-256, another curve, or another algorithm. */
static inline int ccrypto_key_kind(const void *key) {
    const EVP_PKEY *k = (const EVP_PKEY *)key;
    switch (EVP_PKEY_get_base_id(k)) {
    case EVP_PKEY_RSA: return CCRYPTO_KEY_RSA;
    case EVP_PKEY_EC: {
        char group[64] = {0};
        size_t got = 0;
        if (EVP_PKEY_get_group_name(k, group, sizeof group, &got) != 1) return CCRYPTO_KEY_EC_OTHER;
        return (strcmp(group, "prime256v1") == 0 || strcmp(group, "P-256") == 0) ? CCRYPTO_KEY_EC_P256 : CCRYPTO_KEY_EC_OTHER;
    }
    default: return CCRYPTO_KEY_OTHER;
    }
}

/* The key's size in bits. */
static inline int ccrypto_key_bits(const void *key) { return EVP_PKEY_get_bits((const EVP_PKEY *)key); }

/* Signs `data` with SHA-256 (RS256: PKCS#1 v1.5; ES256: ECDSA). For an EC key the signature is
   JWS's form, r and s as 32 bytes each (RFC 7518 §3.4), not DER. `signature` holds `capacity`
   bytes; returns the length written, or -1. */
static inline long ccrypto_sign_sha256(const void *key, const void *data, long length, unsigned char *signature, long capacity) {
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx) return -1;
    long result = -1;
    size_t der_length = 0;
    unsigned char *der = 0;
    if (EVP_DigestSignInit(ctx, 0, EVP_sha256(), 0, (EVP_PKEY *)key) != 1) goto done;
    if (EVP_DigestSign(ctx, 0, &der_length, data, (size_t)length) != 1) goto done;
    der = OPENSSL_malloc(der_length);
    if (!der || EVP_DigestSign(ctx, der, &der_length, data, (size_t)length) != 1) goto done;
    if (EVP_PKEY_get_base_id((const EVP_PKEY *)key) == EVP_PKEY_EC) {
        const unsigned char *p = der;
        ECDSA_SIG *sig = d2i_ECDSA_SIG(0, &p, (long)der_length);
        if (!sig || capacity < 64) { ECDSA_SIG_free(sig); goto done; }
        const BIGNUM *r = 0, *s = 0;
        ECDSA_SIG_get0(sig, &r, &s);
        int ok = BN_bn2binpad(r, signature, 32) == 32 && BN_bn2binpad(s, signature + 32, 32) == 32;
        ECDSA_SIG_free(sig);
        if (ok) result = 64;
    } else if ((long)der_length <= capacity) {
        memcpy(signature, der, der_length);
        result = (long)der_length;
    }
done:
    OPENSSL_free(der);
    EVP_MD_CTX_free(ctx);
    ERR_clear_error();
    return result;
}

/* Verifies a JWS-form SHA-256 signature (the inverse of ccrypto_sign_sha256) with `key`'s public
   half: 1 valid, 0 not. The tests check the proxy's assertions with it. */
static inline int ccrypto_verify_sha256(const void *key, const void *data, long length, const unsigned char *signature, long signature_length) {
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx) return 0;
    int valid = 0;
    unsigned char *der = 0;
    long der_length = signature_length;
    const unsigned char *checked = signature;
    if (EVP_PKEY_get_base_id((const EVP_PKEY *)key) == EVP_PKEY_EC) {
        if (signature_length != 64) goto done;
        ECDSA_SIG *sig = ECDSA_SIG_new();
        BIGNUM *r = BN_bin2bn(signature, 32, 0), *s = BN_bin2bn(signature + 32, 32, 0);
        if (!sig || !r || !s || ECDSA_SIG_set0(sig, r, s) != 1) { BN_free(r); BN_free(s); ECDSA_SIG_free(sig); goto done; }
        der_length = i2d_ECDSA_SIG(sig, &der);
        ECDSA_SIG_free(sig);
        if (der_length <= 0) goto done;
        checked = der;
    }
    if (EVP_DigestVerifyInit(ctx, 0, EVP_sha256(), 0, (EVP_PKEY *)key) == 1)
        valid = EVP_DigestVerify(ctx, checked, (size_t)der_length, data, (size_t)length) == 1;
done:
    OPENSSL_free(der);
    EVP_MD_CTX_free(ctx);
    ERR_clear_error();
    return valid;
}

/* Whether the PEM certificate in `cert` exists and matches `key`: 1 yes, 0 another key's,
   -1 not a certificate. */
static inline int ccrypto_certificate_matches(const void *cert, long length, const void *key) {
    BIO *bio = BIO_new_mem_buf(cert, (int)length);
    if (!bio) return -1;
    X509 *x509 = PEM_read_bio_X509(bio, 0, 0, 0);
    BIO_free(bio);
    if (!x509) { ERR_clear_error(); return -1; }
    int matches = X509_check_private_key(x509, (EVP_PKEY *)key) == 1;
    X509_free(x509);
    ERR_clear_error();
    return matches ? 1 : 0;
}

#endif
