// APNs through Java's own java.net.http client over HTTP/2 and TLS (ALPN h2): an ES256 provider
// token, then COUNT pushes at once. Trusts the mock's CA through a PKCS#12 trust store
// (-Djavax.net.ssl.trustStore). Exits 1 unless every push got 200 over HTTP/2.
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyFactory;
import java.security.Signature;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

public class APNsJava {
    public static void main(String[] args) throws Exception {
        String keyPath = args[0], keyId = args[1], team = args[2], topic = args[3], token = args[4];
        int count = Integer.parseInt(args[5]);
        String pem = Files.readString(Path.of(keyPath)).replaceAll("-----[A-Z ]+-----", "").replaceAll("\\s", "");
        var key = KeyFactory.getInstance("EC").generatePrivate(new PKCS8EncodedKeySpec(Base64.getDecoder().decode(pem)));
        var b64 = Base64.getUrlEncoder().withoutPadding();
        String signed = b64.encodeToString(("{\"alg\":\"ES256\",\"kid\":\"" + keyId + "\"}").getBytes())
            + "." + b64.encodeToString(("{\"iss\":\"" + team + "\",\"iat\":" + System.currentTimeMillis() / 1000 + "}").getBytes());
        Signature signer = Signature.getInstance("SHA256withECDSAinP1363Format");
        signer.initSign(key);
        signer.update(signed.getBytes());
        String jwt = signed + "." + b64.encodeToString(signer.sign());
        HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_2).build();
        List<CompletableFuture<HttpResponse<String>>> responses = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            HttpRequest request = HttpRequest.newBuilder(URI.create("https://api.push.apple.com/3/device/" + token))
                .header("authorization", "bearer " + jwt).header("apns-topic", topic).header("apns-push-type", "alert")
                .POST(HttpRequest.BodyPublishers.ofString("{\"aps\":{\"alert\":\"runtime probe java " + i + "\"}}")).build();
            responses.add(client.sendAsync(request, HttpResponse.BodyHandlers.ofString()));
        }
        int ok = 0;
        for (var future : responses) {
            var response = future.get(30, TimeUnit.SECONDS);
            if (response.statusCode() == 200 && response.version() == HttpClient.Version.HTTP_2) ok++;
            else System.err.println("java: " + response.version() + " " + response.statusCode() + " " + response.body());
        }
        System.out.println("java " + System.getProperty("java.version") + " HttpClient: " + ok + "/" + count + " accepted over HTTP/2");
        System.exit(ok == count ? 0 : 1);
    }
}
