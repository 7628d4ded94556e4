/**
 * The vocabulary synthetic profiles are drawn from: countries with their cities, time zones, languages, phone
 * formats, carriers and names; devices; campaigns, events and products. Plain data, no logic beyond lookups.
 * Addresses use reserved example domains so that generated emails can never reach anyone.
 */

export interface City {
  name: string;
  lat: number;
  lon: number;
  tz: string;
}

export interface Country {
  code: string;
  weight: number;
  languages: string[];
  cities: City[];
  /** E.164 prefix and the count of random digits after it; first digit choices keep numbers plausible. */
  phone: { prefixes: string[]; digits: number };
  carriers: string[];
  names: NameSet;
}

export interface NameSet {
  male: string[];
  female: string[];
  last: string[];
}

const EN: NameSet = {
  male: [
    'James',
    'John',
    'Robert',
    'Michael',
    'William',
    'David',
    'Joseph',
    'Daniel',
    'Matthew',
    'Anthony',
    'Andrew',
    'Joshua',
    'Ethan',
    'Noah',
    'Liam',
    'Oliver',
  ],
  female: [
    'Mary',
    'Patricia',
    'Jennifer',
    'Linda',
    'Elizabeth',
    'Sarah',
    'Jessica',
    'Emily',
    'Olivia',
    'Emma',
    'Ava',
    'Sophia',
    'Chloë',
    'Grace',
    'Zoë',
    'Hannah',
  ],
  last: [
    'Smith',
    'Johnson',
    'Williams',
    'Brown',
    'Jones',
    'Miller',
    'Davis',
    'Wilson',
    'Anderson',
    'Taylor',
    'Thomas',
    'Moore',
    'Martin',
    'Jackson',
    "O'Brien",
    'Nguyen',
    'Clarke',
    'Walker',
  ],
};
const DE: NameSet = {
  male: ['Lukas', 'Leon', 'Jonas', 'Felix', 'Maximilian', 'Paul', 'Jürgen', 'Stefan', 'Matthias', 'Tobias'],
  female: ['Anna', 'Lena', 'Sophie', 'Marie', 'Katharina', 'Julia', 'Jana', 'Sabine', 'Birgit', 'Lea'],
  last: [
    'Müller',
    'Schmidt',
    'Schneider',
    'Fischer',
    'Weber',
    'Meyer',
    'Wagner',
    'Becker',
    'Schulz',
    'Hoffmann',
    'Koch',
    'Weiß',
  ],
};
const FR: NameSet = {
  male: ['Lucas', 'Hugo', 'Louis', 'Gabriel', 'Jules', 'Arthur', 'Théo', 'Raphaël', 'Nicolas', 'Antoine'],
  female: ['Emma', 'Jade', 'Louise', 'Alice', 'Chloé', 'Léa', 'Manon', 'Camille', 'Inès', 'Céline'],
  last: [
    'Martin',
    'Bernard',
    'Dubois',
    'Thomas',
    'Robert',
    'Richard',
    'Petit',
    'Durand',
    'Leroy',
    'Moreau',
    'Lefèvre',
    'Fournier',
  ],
};
const PT: NameSet = {
  male: ['Miguel', 'Arthur', 'Heitor', 'Bernardo', 'Davi', 'Gabriel', 'Pedro', 'João', 'Lucas', 'Rafael'],
  female: ['Helena', 'Alice', 'Laura', 'Maria', 'Valentina', 'Beatriz', 'Júlia', 'Mariana', 'Larissa', 'Camila'],
  last: [
    'Silva',
    'Santos',
    'Oliveira',
    'Souza',
    'Rodrigues',
    'Ferreira',
    'Alves',
    'Pereira',
    'Lima',
    'Gomes',
    'Araújo',
    'Conceição',
  ],
};
const HI: NameSet = {
  male: ['Aarav', 'Vivaan', 'Aditya', 'Arjun', 'Rohan', 'Rahul', 'Vikram', 'Sanjay', 'Karan', 'Ishaan'],
  female: ['Saanvi', 'Ananya', 'Diya', 'Priya', 'Aadhya', 'Kavya', 'Neha', 'Pooja', 'Isha', 'Meera'],
  last: ['Sharma', 'Verma', 'Gupta', 'Patel', 'Singh', 'Kumar', 'Reddy', 'Iyer', 'Nair', 'Das', 'Mehta', 'Joshi'],
};
const JA: NameSet = {
  male: ['Haruto', 'Yuto', 'Sota', 'Ren', 'Hiroshi', 'Takeshi', 'Kenji', 'Daiki', 'Riku', 'Shota'],
  female: ['Yui', 'Hina', 'Aoi', 'Sakura', 'Yuna', 'Mei', 'Haruka', 'Emi', 'Aiko', 'Naomi'],
  last: [
    'Sato',
    'Suzuki',
    'Takahashi',
    'Tanaka',
    'Watanabe',
    'Ito',
    'Yamamoto',
    'Nakamura',
    'Kobayashi',
    'Kato',
    'Yoshida',
    'Yamada',
  ],
};
const ES: NameSet = {
  male: ['Santiago', 'Mateo', 'Sebastián', 'Leonardo', 'Diego', 'Alejandro', 'Javier', 'Carlos', 'Pablo', 'Andrés'],
  female: ['Sofía', 'Valentina', 'Regina', 'Camila', 'María', 'Lucía', 'Paula', 'Daniela', 'Isabella', 'Elena'],
  last: [
    'García',
    'Rodríguez',
    'Hernández',
    'López',
    'Martínez',
    'González',
    'Pérez',
    'Sánchez',
    'Ramírez',
    'Torres',
    'Flores',
    'Núñez',
  ],
};
const NL: NameSet = {
  male: ['Daan', 'Sem', 'Lucas', 'Levi', 'Finn', 'Bram', 'Jesse', 'Thijs', 'Ruben', 'Joris'],
  female: ['Emma', 'Julia', 'Tess', 'Sophie', 'Zoë', 'Fenna', 'Sanne', 'Lotte', 'Eva', 'Anouk'],
  last: [
    'de Jong',
    'Jansen',
    'de Vries',
    'van den Berg',
    'van Dijk',
    'Bakker',
    'Janssen',
    'Visser',
    'Smit',
    'Meijer',
    'de Boer',
    'Mulder',
  ],
};

export const COUNTRIES: Country[] = [
  {
    code: 'US',
    weight: 34,
    languages: ['en', 'en', 'en', 'en', 'es'],
    cities: [
      { name: 'New York', lat: 40.7128, lon: -74.006, tz: 'America/New_York' },
      { name: 'Los Angeles', lat: 34.0522, lon: -118.2437, tz: 'America/Los_Angeles' },
      { name: 'Chicago', lat: 41.8781, lon: -87.6298, tz: 'America/Chicago' },
      { name: 'Houston', lat: 29.7604, lon: -95.3698, tz: 'America/Chicago' },
      { name: 'Phoenix', lat: 33.4484, lon: -112.074, tz: 'America/Phoenix' },
      { name: 'Seattle', lat: 47.6062, lon: -122.3321, tz: 'America/Los_Angeles' },
      { name: 'Boston', lat: 42.3601, lon: -71.0589, tz: 'America/New_York' },
      { name: 'Miami', lat: 25.7617, lon: -80.1918, tz: 'America/New_York' },
      { name: 'Denver', lat: 39.7392, lon: -104.9903, tz: 'America/Denver' },
      { name: 'Atlanta', lat: 33.749, lon: -84.388, tz: 'America/New_York' },
    ],
    phone: {
      prefixes: [
        '+1212',
        '+1310',
        '+1312',
        '+1713',
        '+1602',
        '+1206',
        '+1617',
        '+1305',
        '+1303',
        '+1404',
        '+1415',
        '+1646',
      ],
      digits: 7,
    },
    carriers: ['Verizon', 'AT&T', 'T-Mobile'],
    names: EN,
  },
  {
    code: 'GB',
    weight: 10,
    languages: ['en'],
    cities: [
      { name: 'London', lat: 51.5074, lon: -0.1278, tz: 'Europe/London' },
      { name: 'Manchester', lat: 53.4808, lon: -2.2426, tz: 'Europe/London' },
      { name: 'Birmingham', lat: 52.4862, lon: -1.8904, tz: 'Europe/London' },
      { name: 'Glasgow', lat: 55.8642, lon: -4.2518, tz: 'Europe/London' },
      { name: 'Leeds', lat: 53.8008, lon: -1.5491, tz: 'Europe/London' },
    ],
    phone: { prefixes: ['+4477', '+4478', '+4479', '+4475'], digits: 8 },
    carriers: ['EE', 'Vodafone UK', 'O2 - UK', 'Three'],
    names: EN,
  },
  {
    code: 'DE',
    weight: 8,
    languages: ['de'],
    cities: [
      { name: 'Berlin', lat: 52.52, lon: 13.405, tz: 'Europe/Berlin' },
      { name: 'Hamburg', lat: 53.5511, lon: 9.9937, tz: 'Europe/Berlin' },
      { name: 'München', lat: 48.1351, lon: 11.582, tz: 'Europe/Berlin' },
      { name: 'Köln', lat: 50.9375, lon: 6.9603, tz: 'Europe/Berlin' },
      { name: 'Frankfurt am Main', lat: 50.1109, lon: 8.6821, tz: 'Europe/Berlin' },
    ],
    phone: { prefixes: ['+49151', '+49160', '+49170', '+49176'], digits: 8 },
    carriers: ['Telekom.de', 'Vodafone.de', 'o2 - de'],
    names: DE,
  },
  {
    code: 'FR',
    weight: 7,
    languages: ['fr'],
    cities: [
      { name: 'Paris', lat: 48.8566, lon: 2.3522, tz: 'Europe/Paris' },
      { name: 'Lyon', lat: 45.764, lon: 4.8357, tz: 'Europe/Paris' },
      { name: 'Marseille', lat: 43.2965, lon: 5.3698, tz: 'Europe/Paris' },
      { name: 'Toulouse', lat: 43.6047, lon: 1.4442, tz: 'Europe/Paris' },
      { name: 'Nice', lat: 43.7102, lon: 7.262, tz: 'Europe/Paris' },
    ],
    phone: { prefixes: ['+336', '+337'], digits: 8 },
    carriers: ['Orange F', 'SFR', 'Bouygues Telecom', 'Free'],
    names: FR,
  },
  {
    code: 'BR',
    weight: 8,
    languages: ['pt'],
    cities: [
      { name: 'São Paulo', lat: -23.5505, lon: -46.6333, tz: 'America/Sao_Paulo' },
      { name: 'Rio de Janeiro', lat: -22.9068, lon: -43.1729, tz: 'America/Sao_Paulo' },
      { name: 'Belo Horizonte', lat: -19.9167, lon: -43.9345, tz: 'America/Sao_Paulo' },
      { name: 'Brasília', lat: -15.7939, lon: -47.8828, tz: 'America/Sao_Paulo' },
      { name: 'Manaus', lat: -3.119, lon: -60.0217, tz: 'America/Manaus' },
    ],
    phone: { prefixes: ['+55119', '+55219', '+55319', '+55619'], digits: 8 },
    carriers: ['Vivo', 'Claro BR', 'TIM'],
    names: PT,
  },
  {
    code: 'IN',
    weight: 8,
    languages: ['hi', 'en'],
    cities: [
      { name: 'Mumbai', lat: 19.076, lon: 72.8777, tz: 'Asia/Kolkata' },
      { name: 'Delhi', lat: 28.7041, lon: 77.1025, tz: 'Asia/Kolkata' },
      { name: 'Bengaluru', lat: 12.9716, lon: 77.5946, tz: 'Asia/Kolkata' },
      { name: 'Hyderabad', lat: 17.385, lon: 78.4867, tz: 'Asia/Kolkata' },
      { name: 'Chennai', lat: 13.0827, lon: 80.2707, tz: 'Asia/Kolkata' },
    ],
    phone: { prefixes: ['+919', '+918', '+917', '+916'], digits: 9 },
    carriers: ['Jio', 'Airtel', 'Vi India'],
    names: HI,
  },
  {
    code: 'JP',
    weight: 5,
    languages: ['ja'],
    cities: [
      { name: 'Tokyo', lat: 35.6762, lon: 139.6503, tz: 'Asia/Tokyo' },
      { name: 'Osaka', lat: 34.6937, lon: 135.5023, tz: 'Asia/Tokyo' },
      { name: 'Yokohama', lat: 35.4437, lon: 139.638, tz: 'Asia/Tokyo' },
      { name: 'Nagoya', lat: 35.1815, lon: 136.9066, tz: 'Asia/Tokyo' },
    ],
    phone: { prefixes: ['+8190', '+8180', '+8170'], digits: 8 },
    carriers: ['NTT DOCOMO', 'au', 'SoftBank'],
    names: JA,
  },
  {
    code: 'CA',
    weight: 5,
    languages: ['en', 'en', 'fr'],
    cities: [
      { name: 'Toronto', lat: 43.6532, lon: -79.3832, tz: 'America/Toronto' },
      { name: 'Montréal', lat: 45.5017, lon: -73.5673, tz: 'America/Toronto' },
      { name: 'Vancouver', lat: 49.2827, lon: -123.1207, tz: 'America/Vancouver' },
      { name: 'Calgary', lat: 51.0447, lon: -114.0719, tz: 'America/Edmonton' },
    ],
    phone: { prefixes: ['+1416', '+1514', '+1604', '+1403'], digits: 7 },
    carriers: ['Rogers', 'Bell', 'TELUS'],
    names: EN,
  },
  {
    code: 'AU',
    weight: 4,
    languages: ['en'],
    cities: [
      { name: 'Sydney', lat: -33.8688, lon: 151.2093, tz: 'Australia/Sydney' },
      { name: 'Melbourne', lat: -37.8136, lon: 144.9631, tz: 'Australia/Melbourne' },
      { name: 'Brisbane', lat: -27.4698, lon: 153.0251, tz: 'Australia/Brisbane' },
      { name: 'Perth', lat: -31.9505, lon: 115.8605, tz: 'Australia/Perth' },
    ],
    phone: { prefixes: ['+614'], digits: 8 },
    carriers: ['Telstra', 'Optus', 'Vodafone AU'],
    names: EN,
  },
  {
    code: 'MX',
    weight: 5,
    languages: ['es'],
    cities: [
      { name: 'Ciudad de México', lat: 19.4326, lon: -99.1332, tz: 'America/Mexico_City' },
      { name: 'Guadalajara', lat: 20.6597, lon: -103.3496, tz: 'America/Mexico_City' },
      { name: 'Monterrey', lat: 25.6866, lon: -100.3161, tz: 'America/Monterrey' },
      { name: 'Tijuana', lat: 32.5149, lon: -117.0382, tz: 'America/Tijuana' },
    ],
    phone: { prefixes: ['+5255', '+5233', '+5281'], digits: 8 },
    carriers: ['Telcel', 'AT&T MX', 'Movistar MX'],
    names: ES,
  },
  {
    code: 'ES',
    weight: 3,
    languages: ['es', 'es', 'ca'],
    cities: [
      { name: 'Madrid', lat: 40.4168, lon: -3.7038, tz: 'Europe/Madrid' },
      { name: 'Barcelona', lat: 41.3874, lon: 2.1686, tz: 'Europe/Madrid' },
      { name: 'Valencia', lat: 39.4699, lon: -0.3763, tz: 'Europe/Madrid' },
      { name: 'Sevilla', lat: 37.3891, lon: -5.9845, tz: 'Europe/Madrid' },
    ],
    phone: { prefixes: ['+346', '+347'], digits: 8 },
    carriers: ['Movistar', 'Vodafone ES', 'Orange ES'],
    names: ES,
  },
  {
    code: 'NL',
    weight: 3,
    languages: ['nl'],
    cities: [
      { name: 'Amsterdam', lat: 52.3676, lon: 4.9041, tz: 'Europe/Amsterdam' },
      { name: 'Rotterdam', lat: 51.9244, lon: 4.4777, tz: 'Europe/Amsterdam' },
      { name: 'Utrecht', lat: 52.0907, lon: 5.1214, tz: 'Europe/Amsterdam' },
    ],
    phone: { prefixes: ['+316'], digits: 8 },
    carriers: ['KPN', 'Vodafone NL', 'Odido'],
    names: NL,
  },
];

export const EMAIL_DOMAINS = ['example.com', 'example.org', 'example.net', 'mail.example.com'];

export const IOS_MODELS = [
  'iPhone 15',
  'iPhone 15 Pro',
  'iPhone 14',
  'iPhone 13',
  'iPhone SE',
  'iPhone 16',
  'iPhone 16 Pro Max',
];
export const IOS_VERSIONS = ['iOS 16.7', 'iOS 17.4', 'iOS 17.6', 'iOS 18.1', 'iOS 18.3', 'iOS 18.5'];
export const ANDROID_MODELS = [
  'Pixel 8',
  'Pixel 7a',
  'Galaxy S24',
  'Galaxy A54',
  'Redmi Note 13',
  'OnePlus 12',
  'moto g84',
];
export const ANDROID_VERSIONS = ['Android 12', 'Android 13', 'Android 14', 'Android 15'];
export const TV_MODELS = [
  { model: 'Apple TV 4K', os: 'tvOS 17.4', platform: 'tvos' },
  { model: 'Chromecast with Google TV', os: 'Android TV 12', platform: 'android_tv' },
  { model: 'Roku Ultra', os: 'Roku OS 12.5', platform: 'roku' },
];
export const APP_VERSIONS = ['3.8.0', '3.9.1', '4.0.0', '4.0.2', '4.1.0', '4.2.1'];

export const ATTRIBUTION = {
  campaigns: ['spring_sale_2025', 'brand_awareness_q3', 'app_install_always_on', 'black_friday_2024', 'referral_boost'],
  sources: ['facebook', 'google_ads', 'tiktok', 'apple_search_ads', 'snapchat'],
  adgroups: ['lookalike_1pct', 'retargeting_30d', 'broad_18_34', 'interest_fitness', 'competitor_keywords'],
  ads: ['video_15s_a', 'video_15s_b', 'carousel_summer', 'static_banner_1', 'playable_demo'],
};

export const CUSTOM_EVENTS: { name: string; p: number; rate: number }[] = [
  // p: share of users who ever did it; rate: mean occurrences per active week.
  { name: 'app_opened', p: 0.95, rate: 4 },
  { name: 'viewed_product', p: 0.45, rate: 3 },
  { name: 'searched', p: 0.3, rate: 2 },
  { name: 'added_to_cart', p: 0.25, rate: 0.8 },
  { name: 'completed_onboarding', p: 0.35, rate: 0 },
  { name: 'shared_content', p: 0.1, rate: 0.2 },
  { name: 'watched_video', p: 0.15, rate: 1 },
  { name: 'rated_app', p: 0.05, rate: 0 },
  { name: 'referred_friend', p: 0.03, rate: 0.05 },
];

export const PRODUCTS: { name: string; price: number; p: number; rate: number }[] = [
  // p: share of purchasers who bought it; rate: mean purchases per active month.
  { name: 'premium_plan', price: 9.99, p: 0.5, rate: 1 },
  { name: 'gift_card', price: 25, p: 0.2, rate: 0.1 },
  { name: 'sneakers', price: 89.9, p: 0.25, rate: 0.08 },
  { name: 'headphones', price: 149, p: 0.1, rate: 0.03 },
  { name: 'paperback_book', price: 14.5, p: 0.3, rate: 0.3 },
  { name: 'coffee_beans', price: 18, p: 0.25, rate: 0.6 },
];

export const CAMPAIGN_NAMES: { name: string; variations?: string[] }[] = [
  { name: 'Welcome email' },
  { name: 'Weekly digest' },
  { name: 'Cart abandonment push', variations: ['Variant A', 'Variant B'] },
  { name: 'Price drop alert' },
  { name: 'Summer sale announcement', variations: ['Short copy', 'Long copy', 'Emoji copy'] },
  { name: 'Re-engagement in-app message' },
  { name: 'Order confirmation' },
  { name: 'New feature spotlight', variations: ['Control', 'Video'] },
];

export const CANVAS_FALLBACK = [
  { api_id: 'canvas-onboarding', name: 'Onboarding journey' },
  { api_id: 'canvas-retention', name: 'Retention journey' },
  { api_id: 'canvas-upsell', name: 'Premium upsell' },
];
export const CANVAS_STEPS = ['Entry message', 'Day 2 reminder', 'Offer', 'Follow-up', 'Exit survey'];
export const CANVAS_VARIATIONS = ['Variant 1', 'Variant 2', 'Control'];
export const CARD_FALLBACK = ['Welcome to the app', 'Summer sale', 'Refer a friend', 'New app version'];
export const APP_FALLBACK = [
  { name: 'iOS app', platform: 'ios' },
  { name: 'Android app', platform: 'android' },
];

export const LOYALTY_TIERS = ['bronze', 'bronze', 'bronze', 'silver', 'silver', 'gold', 'platinum'];
export const CATEGORIES = ['shoes', 'electronics', 'gifts', 'books', 'outdoor', 'beauty', 'home', 'toys', 'coffee'];
export const SIGNUP_CHANNELS = ['app', 'web', 'in_store', 'referral', 'social'];
/** Text that needs escaping in COPY, JSON and CSV alike, carried by a few profiles so every path is exercised. */
export const AWKWARD_NOTES = [
  'Said "hi" twice\tthen left',
  'Path C:\\Users\\demo\\notes.txt',
  'Line one\nline two\r\nline three',
  'Emoji ✓ 🎉 and accents: Zoë, Müller, São Paulo',
  'Back\\slash, "quote", tab\t, and a trailing backslash \\',
];
