/*
 * The dev stack's Iceberg REST catalog: Apache Iceberg's RESTCatalogServer (iceberg-open-api's test
 * fixtures, version 1.10) as it builds its backend catalog and its servlet, with three differences
 * that RESTCatalogServer.main does not offer:
 *
 *  - it listens on one address (ako.rest.host, the stack's 127.0.0.1), not on every interface, and
 *    without SO_REUSEPORT;
 *  - it never logs the catalog properties (RESTCatalogServer logs them at INFO, JDBC password and
 *    S3 secret key included);
 *  - requests need authentication: the OAuth2 client-credentials grant at /v1/oauth/tokens checks
 *    the client id and secret (Iceberg's adapter accepts any) and answers with the stack's bearer
 *    token; every other request must carry that token.
 *
 * The backend catalog's properties come from CATALOG_* environment variables, as for
 * RESTCatalogServer (RCKUtils.environmentCatalogConfig); the client secret and the token from
 * AKO_REST_CLIENT_SECRET and AKO_REST_TOKEN. Nothing secret is on the command line.
 * It sits in Iceberg's package to reach RESTCatalogServer's package-private CatalogContext and
 * RESTServerCatalogAdapter (the adapter that vends storage credentials with include-credentials).
 */
package org.apache.iceberg.rest;

import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpFilter;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.servlet.FilterHolder;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;

public final class LoopbackRESTCatalogServer {
  private LoopbackRESTCatalogServer() {}

  private static String required(String name) {
    String value = System.getenv(name);
    if (value == null || value.isEmpty()) {
      throw new IllegalStateException(name + " is not set");
    }
    return value;
  }

  private static boolean same(String a, String b) {
    return a != null
        && MessageDigest.isEqual(a.getBytes(StandardCharsets.UTF_8), b.getBytes(StandardCharsets.UTF_8));
  }

  /** OAuth2 client credentials in, the stack's bearer token out; every other call needs the token. */
  static final class Gate extends HttpFilter {
    private final String clientId;
    private final String clientSecret;
    private final String token;

    Gate(String clientId, String clientSecret, String token) {
      this.clientId = clientId;
      this.clientSecret = clientSecret;
      this.token = token;
    }

    @Override
    protected void doFilter(HttpServletRequest req, HttpServletResponse resp, FilterChain chain)
        throws IOException, ServletException {
      if (req.getRequestURI().endsWith("/v1/oauth/tokens")) {
        Map<String, String> form = new HashMap<>();
        for (String pair : new String(req.getInputStream().readAllBytes(), StandardCharsets.UTF_8).split("&")) {
          int eq = pair.indexOf('=');
          if (eq > 0) {
            form.put(
                URLDecoder.decode(pair.substring(0, eq), StandardCharsets.UTF_8),
                URLDecoder.decode(pair.substring(eq + 1), StandardCharsets.UTF_8));
          }
        }
        if (!"client_credentials".equals(form.get("grant_type"))
            || !same(form.get("client_id"), clientId)
            || !same(form.get("client_secret"), clientSecret)) {
          reply(resp, 401, "{\"error\":\"invalid_client\",\"error_description\":\"unknown client or wrong secret\"}");
          return;
        }
        reply(resp, 200, "{\"access_token\":\"" + token + "\",\"token_type\":\"bearer\","
            + "\"issued_token_type\":\"urn:ietf:params:oauth:token-type:access_token\",\"expires_in\":3600}");
        return;
      }
      if (!same(req.getHeader("Authorization"), "Bearer " + token)) {
        reply(resp, 401, "{\"error\":{\"message\":\"Not authorized: a valid bearer token is required\","
            + "\"type\":\"NotAuthorizedException\",\"code\":401}}");
        return;
      }
      chain.doFilter(req, resp);
    }

    private static void reply(HttpServletResponse resp, int status, String json) throws IOException {
      resp.setStatus(status);
      resp.setContentType("application/json");
      resp.getOutputStream().write(json.getBytes(StandardCharsets.UTF_8));
    }
  }

  public static void main(String[] args) throws Exception {
    Map<String, String> properties = new HashMap<>(RCKUtils.environmentCatalogConfig());
    String name = properties.getOrDefault(RESTCatalogServer.CATALOG_NAME, "rest_backend");
    // a Hadoop configuration for HadoopFileIO, which ResolvingFileIO picks for tables on local disk
    Catalog backend = CatalogUtil.buildIcebergCatalog(name, properties, new Configuration());
    RESTCatalogServer.CatalogContext context = new RESTCatalogServer.CatalogContext(backend, properties);

    ServletContextHandler handler = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    handler.addServlet(new ServletHolder(new RESTCatalogServlet(new RESTServerCatalogAdapter(context))), "/*");
    Gate gate = new Gate(required("AKO_REST_CLIENT_ID"), required("AKO_REST_CLIENT_SECRET"), required("AKO_REST_TOKEN"));
    handler.addFilter(new FilterHolder(gate), "/*", EnumSet.of(jakarta.servlet.DispatcherType.REQUEST));

    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost(System.getProperty("ako.rest.host", "127.0.0.1"));
    connector.setPort(Integer.parseInt(required("AKO_REST_PORT")));
    server.addConnector(connector);
    server.setHandler(handler);
    server.start();
    server.join();
  }
}
