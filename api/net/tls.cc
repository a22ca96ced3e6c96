#include "api/net/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <fstream>

#include "fmt/format.h"

namespace switchyard {
namespace {

namespace ssl = boost::asio::ssl;

// The reason of the last OpenSSL error, or `fallback`.
std::string OpenSslReason(std::string_view fallback) {
  const unsigned long code = ERR_get_error();  // NOLINT(google-runtime-int): OpenSSL's type
  ERR_clear_error();
  if (code == 0) return std::string(fallback);
  const char* reason = ERR_reason_error_string(code);
  return reason != nullptr ? std::string(reason) : std::string(fallback);
}

bool Readable(const std::string& path) { return std::ifstream(path).good(); }

}  // namespace

absl::StatusOr<std::shared_ptr<ssl::context>> LoadServerTlsContext(const TlsOptions& options,
                                                                   TlsFile* failed) {
  auto fail = [&](TlsFile file, std::string message) {
    if (failed != nullptr) *failed = file;
    return absl::InvalidArgumentError(std::move(message));
  };
  if (options.certificate_file.empty()) {
    return fail(TlsFile::kCertificate, "a certificate file is needed with a private key file");
  }
  if (options.private_key_file.empty()) {
    return fail(TlsFile::kPrivateKey, "a private key file is needed with a certificate file");
  }
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                       ssl::context::single_dh_use);
  SSL_CTX* native = context->native_handle();
  ERR_clear_error();
  if (!Readable(options.certificate_file)) {
    return fail(TlsFile::kCertificate,
                fmt::format("cannot read certificate file {}", options.certificate_file));
  }
  if (SSL_CTX_use_certificate_chain_file(native, options.certificate_file.c_str()) != 1) {
    return fail(TlsFile::kCertificate,
                fmt::format("{} is not a PEM certificate chain: {}", options.certificate_file,
                            OpenSslReason("no certificate")));
  }
  if (!Readable(options.private_key_file)) {
    return fail(TlsFile::kPrivateKey,
                fmt::format("cannot read private key file {}", options.private_key_file));
  }
  if (SSL_CTX_use_PrivateKey_file(native, options.private_key_file.c_str(), SSL_FILETYPE_PEM) !=
      1) {
    return fail(TlsFile::kPrivateKey,
                fmt::format("{} is not a PEM private key for the certificate: {}",
                            options.private_key_file, OpenSslReason("no key")));
  }
  if (SSL_CTX_check_private_key(native) != 1) {
    return fail(TlsFile::kPrivateKey,
                fmt::format("{} does not match the certificate of {}: {}", options.private_key_file,
                            options.certificate_file, OpenSslReason("key mismatch")));
  }
  return context;
}

absl::StatusOr<std::unique_ptr<ListenerTls>> ListenerTls::Create(TlsOptions options) {
  absl::StatusOr<std::shared_ptr<ssl::context>> context = LoadServerTlsContext(options);
  if (!context.ok()) return context.status();
  return std::unique_ptr<ListenerTls>(new ListenerTls(std::move(options), *std::move(context)));
}

absl::Status ListenerTls::Reload() {
  absl::StatusOr<std::shared_ptr<ssl::context>> context = LoadServerTlsContext(options_);
  if (!context.ok()) return context.status();
  current_.store(*std::move(context));
  return absl::OkStatus();
}

}  // namespace switchyard
