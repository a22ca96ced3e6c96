#pragma once

#include <string>

namespace boost::asio::ssl {
class context;
}

namespace switchyard::testing {

// A self-signed certificate made at run time for the DNS name "localhost", marked as an
// authority so that a client may trust it directly (as a CA file).
struct TestCertificate {
  std::string certificate_pem;
  std::string private_key_pem;
};
TestCertificate MakeTestCertificate();

// Serves `certificate` from a TLS server context.
void UseTestCertificate(boost::asio::ssl::context& server, const TestCertificate& certificate);

}  // namespace switchyard::testing
